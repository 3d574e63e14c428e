"""Judge-side drivers of stateful problems: they run in the judge and reach the worker only through grader.session."""
