-- A claim that finds nothing ready names the project's tasks whose lease
-- has lapsed, longest lapsed first (only a recovery gives them back). It
-- read every claimed task of the project (0021's index holds them in
-- creation order) and sorted them by expiry: 1.5 ms at 5,001 claimed tasks
-- with none lapsed, inside the writer, on every empty claim an agent's
-- polling loop makes. By expiry, the lapsed ones are the start of one
-- range.
CREATE INDEX tasks_lease_expiry ON tasks (project_id, lease_expires_at, id)
  WHERE status = 'claimed';
