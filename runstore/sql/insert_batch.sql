-- name: InsertBatch :exec
-- A batch's row ($1 id, $2 org id, $3 size); its runs name it by id.
INSERT INTO batches (id, org_id, size) VALUES ($1, $2, $3);
