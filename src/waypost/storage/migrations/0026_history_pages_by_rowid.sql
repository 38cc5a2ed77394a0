-- A task's checkpoints and submissions page newest first by rowid (the
-- order they were made: the tables are insert-only; `at` can go back with
-- a stepped wall clock). Their indexes were ordered by `at`, so one page,
-- and the latest submission a review judges, read and sorted the task's
-- whole history (7 ms for a page at 5,000 checkpoints). An index on
-- `task_id` alone holds each task's rows in rowid order.
DROP INDEX submissions_by_task;
CREATE INDEX submissions_by_task ON submissions (task_id);
DROP INDEX checkpoints_by_task;
CREATE INDEX checkpoints_by_task ON task_checkpoints (task_id);
