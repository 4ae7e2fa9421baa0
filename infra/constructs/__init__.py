"""One construct per unit of the system; the stack (``infra.stack``) composes them."""
