"""A backend in its own process: `runner` starts and talks to a `worker` (forked by a `worker`
zygote, with a warm spare behind it), over `wire`'s JSON lines, and turns a death or a hang into a
verdict."""
