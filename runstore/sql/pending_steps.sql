-- A chain's steps (and for_each instances) not yet dispatched.
SELECT count(*) FROM chain_steps WHERE chain_id = $1 AND status = 'pending'
