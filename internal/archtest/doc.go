// Package archtest holds no code, only tests of the module's shape: every
// import edge between Sluice packages is allowed by the import table in
// docs/design.md; the worker links no store, tenant, routing, gateway or
// registry package, the data plane no store and no control plane
// package, a runtime no transport; and the layout in docs/design.md names
// every package under internal/. `go test ./internal/archtest -run
// TestImportTable -args -print-table` prints the table the code has now.
package archtest
