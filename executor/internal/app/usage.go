package app

import "fmt"

// Usage is the help of executor (class cpu) and executor-gpu (class gpu).
func Usage(name, class string) string {
	addr := "127.0.0.1:8081"
	if class == "gpu" {
		addr = "127.0.0.1:8082"
	}
	return fmt.Sprintf(`Usage: %[1]s [command]

Consumes Switchyard's %[2]s-class named queues and runs their jobs; serves only /healthz
and /metrics over HTTP.

Commands:
  serve     consume queues (default)
  migrate   apply database migrations and exit
  help      print this help

Environment:
  SWITCHYARD_DATABASE_URL       Postgres (required)
  SWITCHYARD_REDIS_URL          Redis (required)
  SWITCHYARD_SERVICE_KEY_FILE   file holding the service key presented to the router (required)
  SWITCHYARD_ROUTER_URL         the provider router (default http://127.0.0.1:8090)
  SWITCHYARD_ROUTER_CA_FILE, SWITCHYARD_ROUTER_CERT_FILE, SWITCHYARD_ROUTER_KEY_FILE
                                mutual TLS to the router: its CA, this executor's client
                                certificate and key (all three or none)
  SWITCHYARD_EXECUTOR_ADDR      /healthz and /metrics (default %[3]s)
  SWITCHYARD_QUEUES             comma-separated queues to serve (default every %[2]s queue)
  SWITCHYARD_LOG_LEVEL          debug, info, warn or error (default info)

See docs/executor.md for the rest.
`, name, class, addr)
}
