"""Reference solutions (instructors only): the same API as ``assignment``."""
