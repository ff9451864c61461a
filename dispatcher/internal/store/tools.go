package store

import (
	"context"
	"fmt"
)

// ToolNames returns the tools an organisation may use: granted to it explicitly.
func ToolNames(ctx context.Context, db DB, orgID string) (map[string]bool, error) {
	rows, err := db.Query(ctx, `SELECT tool_name FROM tool_grants WHERE org_id = $1`, orgID)
	if err != nil {
		return nil, fmt.Errorf("listing tools: %w", err)
	}
	defer rows.Close()
	names := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		names[n] = true
	}
	return names, rows.Err()
}
