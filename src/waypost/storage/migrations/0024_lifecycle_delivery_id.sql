-- Each delivery's own id, the key a webhook receiver deduplicates by
-- (`Waypost-Delivery-Id`). An event's sequence is handed out again after a
-- restore from a backup (the events written after the backup are not in
-- it), so a receiver that deduplicated by `Waypost-Delivery` (the sequence)
-- dropped the new events that reused a number it had seen. A random id
-- travels with its row: an attempt sent again (after a kill -9, or from a
-- backup in which it was still pending) keeps its id; a new event, whatever
-- its number, gets a new one. Rows of earlier builds get theirs here.
ALTER TABLE lifecycle_deliveries ADD COLUMN delivery_id TEXT;
UPDATE lifecycle_deliveries SET delivery_id = lower(hex(randomblob(16)));
CREATE UNIQUE INDEX lifecycle_deliveries_by_id ON lifecycle_deliveries (delivery_id);
