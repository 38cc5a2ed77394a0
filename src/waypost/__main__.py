"""`python -m waypost`: the same command line as the `waypost` script, for a
checkout or an environment whose scripts are not on PATH."""

from waypost.launch import main

main()
