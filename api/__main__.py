"""`python -m api [--insecure]`."""

from models.process import run_main

from .serve import main

run_main(main)
