package handoff

import "net/url"

// keyPrefix starts every Redis key of this package.
const keyPrefix = "sy:step:"

// keys returns the answer key, the claim key and the open-calls key of a pair. All carry
// the hash tag {org/job}, so the scripts touching them run on one Redis Cluster node; the
// step key is query-escaped, so no step key can make two pairs share a key.
//
// The open-calls key is a set of the tokens of the pair's calls that claimed it and have
// neither stored an answer nor released their claim: while a call runs, its own; once its
// claim has expired, a call cut off by its router's death.
func keys(p Pair) (answer, claim, open string) {
	base := keyPrefix + "{" + url.QueryEscape(p.OrgID) + "/" + url.QueryEscape(p.JobID) + "}:" + url.QueryEscape(p.Step)
	return base + ":answer", base + ":claim", base + ":open"
}
