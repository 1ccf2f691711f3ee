"""gradcert: property-based verification of reverse-mode differentiation ("backward") transforms."""

__version__ = "0.1.0"
