package estimate

import "net/url"

// keyPrefix starts every Redis key of this package.
const keyPrefix = "sy:est:"

// statsKey is the hash of one (skill, model) pair's completion statistics. Escaping keeps
// a "/" in a skill name from colliding with another pair.
func statsKey(skill, model string) string {
	return keyPrefix + url.QueryEscape(skill) + "/" + url.QueryEscape(model)
}
