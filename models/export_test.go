package models

// Test-only views of unexported names, for the external tests of this package.

// OperationColumns is operationColumns.
const OperationColumns = operationColumns
