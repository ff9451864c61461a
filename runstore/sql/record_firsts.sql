-- name: RecordFirsts :many
-- Journals the first event (seq 1) of each of many new runs, inserted with event_seq 1 in
-- the same transaction: $1 run ids, $2 org ids, $3 types, $4 data.
INSERT INTO run_events (run_id, seq, org_id, type, data)
SELECT run_id::uuid, 1, org_id::uuid, type, data
FROM unnest($1::text[], $2::text[], $3::text[], $4::jsonb[]) AS e(run_id, org_id, type, data)
RETURNING run_id::text, ts;
