"""The task suites and their grader (``suite``)."""
