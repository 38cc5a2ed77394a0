"""The private lifecycle listener (contract section 11); served by `serve` beside the public app."""
