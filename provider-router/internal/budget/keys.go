package budget

import "time"

// keyPrefix starts every Redis key of this package.
const keyPrefix = "sy:budget:"

// spendKey is the hash of one run's or chain's spend: "spent" (nano-USD the router has
// charged, seeded from Postgres when the key is new) and "held" (nano-USD reserved by calls
// in flight at their worst case). The braces keep it on one Redis Cluster slot.
func spendKey(scope Scope, id string) string {
	return keyPrefix + "{" + string(scope) + ":" + id + "}"
}

// quotaKey counts an organisation's tokens in one calendar month (UTC), reservations
// included; it expires a week after the month ends.
func quotaKey(orgID string, month time.Time) string {
	return keyPrefix + "quota:{" + orgID + "}:" + month.Format("2006-01")
}
