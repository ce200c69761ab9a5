"""The problems: discovery of the problem files, their constants read with `ast` (`problem`),
source -> module -> model and inputs (`materialize`), and input/output specs (`specs`)."""
