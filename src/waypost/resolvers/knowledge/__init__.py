"""Knowledge records, their revisions, feedback and submission lessons."""
