"""gradcert: property-based verification of reverse-mode differentiation ("backward") transforms."""

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # `gradcert.check` imports NumPy and the IR only when asked for (certify's own process imports neither)
    if name == "check":
        from gradcert.runs.check import check

        return check
    raise AttributeError(f"module 'gradcert' has no attribute {name!r}")
