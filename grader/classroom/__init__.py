"""Grading a class: batches, the gradebook, one student's feedback, Gradescope and Slurm."""
