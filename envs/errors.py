"""The one exception type for bad user input (files, keys, values).

Everything the user can fix by editing a file or a flag raises `InputError` with a
message that names the file or key and says how to fix it. The CLI prints the message
on one line and exits with code 2; no traceback is shown for these.
"""


class InputError(ValueError):
    """Bad user input: the message alone must tell the user what to change."""
