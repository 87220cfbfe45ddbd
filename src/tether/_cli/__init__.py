"""Internals of the ``tether`` command (see ``tether.cli``)."""
