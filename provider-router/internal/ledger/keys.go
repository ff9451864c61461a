package ledger

// keyPrefix starts every Redis key of this package.
const keyPrefix = "sy:ledger:"

const (
	// streamKey is the stream of entries not yet in Postgres: each message has one field,
	// fieldEntry, holding the entry as JSON. Moved messages are acknowledged and deleted, so
	// its length is the backlog.
	streamKey = keyPrefix + "stream"
	// deadKey is the stream of entries Postgres refused as invalid data (fields fieldEntry,
	// "error" and "id", the message id they had in streamKey), kept for an operator.
	deadKey = keyPrefix + "dead"
	// group is the consumer group every router replica's mover reads streamKey through.
	group = "movers"
	// fieldEntry is the message field holding the entry.
	fieldEntry = "e"
)
