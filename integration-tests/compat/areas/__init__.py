"""One module per client area of the compatibility matrix. Each module
defines `checks(ctx) -> list[Check]`; each may have a sibling `<area>.sh`
that scripts/compat runs first to install what the area needs."""
