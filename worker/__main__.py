"""`python -m worker`."""

from models.process import run_main

from .main import main

run_main(main)
