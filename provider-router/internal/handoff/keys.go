package handoff

import "net/url"

// keyPrefix starts every Redis key of this package.
const keyPrefix = "sy:step:"

// keys returns the answer key and the claim key of a pair. Both carry the hash tag
// {org/job}, so the scripts touching them run on one Redis Cluster node; the step key is
// query-escaped, so no step key can make two pairs share a key.
func keys(p Pair) (answer, claim string) {
	base := keyPrefix + "{" + url.QueryEscape(p.OrgID) + "/" + url.QueryEscape(p.JobID) + "}:" + url.QueryEscape(p.Step)
	return base + ":answer", base + ":claim"
}
