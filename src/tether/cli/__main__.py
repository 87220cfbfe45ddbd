"""``python -m tether.cli``: the ``tether`` command without the console script."""

from . import main

if __name__ == "__main__":
    main()
