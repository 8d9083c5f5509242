"""Command-line interface: a thin layer over the library API.

Every module in this package that defines ``register(subparsers)`` adds its commands.
"""
