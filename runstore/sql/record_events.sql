-- name: RecordEvents :one
-- Takes n sequence numbers of the run ($1) in one update of its row and journals its n
-- events ($2 types, $3 data) with them, in order; answers the first number taken and the
-- timestamp. The insert is transition.go's insertEventsFrom spelled out.
WITH s AS (
	UPDATE runs SET event_seq = event_seq + cardinality($2::text[]) WHERE id = $1
	RETURNING id AS run_id, org_id, event_seq - cardinality($2::text[]) AS base),
i AS (
	INSERT INTO run_events (run_id, seq, org_id, type, data)
	SELECT s.run_id, s.base + x.n, s.org_id, x.type, x.data
	FROM s s, unnest($2::text[], $3::jsonb[]) WITH ORDINALITY AS x(type, data, n))
SELECT base + 1, now() FROM s;
