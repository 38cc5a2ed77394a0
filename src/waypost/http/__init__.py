"""What every public request passes: authentication and strict body decoding."""
