"""`waypost admin backup` and `waypost admin verify` (docs/operations.md):
the copy in `backups`, the checks in `checks`, the report in `verification`,
and the files both open in `files`."""

from waypost.maintenance.backups import backup
from waypost.maintenance.files import BackupError, open_read_only, present
from waypost.maintenance.verification import verify

__all__ = ["BackupError", "backup", "open_read_only", "present", "verify"]
