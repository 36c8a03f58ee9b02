"""The one exception type for bad input anywhere in linkscope."""


class InputError(Exception):
    """Bad user input: the message is one line that names the file, line or field and the problem.

    The command line prints it on stderr and exits with status 2; no traceback is shown.
    """
