"""Reports rendered from results files: HTML, JSON summary, JUnit XML."""
