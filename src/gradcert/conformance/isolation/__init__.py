"""A backend in its own process: `runner` starts and talks to a `worker`, over `wire`'s JSON
lines, and turns a death or a hang into a verdict."""
