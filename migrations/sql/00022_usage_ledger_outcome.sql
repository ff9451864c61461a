-- What the ledger knows of a call's outcome. 'answered': the router received the
-- provider's answer and charged it (tokens and cost are the provider's). 'unknown': the
-- router that made the call died while it was at the provider (claimed, never finished
-- nor released); the call may have been answered and billed there, but nobody received
-- the answer, so tokens and cost are 0 and the provider's invoice is the only account of
-- it. The call that took the step over writes the row. An answered entry of the same
-- call_key arriving later (its router only stalled) replaces an unknown row.

-- +goose Up
ALTER TABLE usage_ledger ADD COLUMN outcome text NOT NULL DEFAULT 'answered'
    CONSTRAINT usage_ledger_outcome_check CHECK (outcome IN ('answered', 'unknown'));

-- +goose Down
ALTER TABLE usage_ledger DROP COLUMN outcome;
