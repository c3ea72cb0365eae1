// Package output writes what a CLI command prints in the format a script
// or a person asked for, as the openstack CLI's -f/-c do (cliff's
// formatters): a table for people, json and yaml for programs, value
// (bare values, one row a line) for shell pipelines.
//
// A command hands over its answer once, as a List (rows of the same
// columns: `server list`) or a Record (one resource's fields: `server
// show`), and Options.Write* renders it, keeping only the columns asked
// for with -c, in the order the command gave. Keys are the command's
// column names (snake_case, as Nova's fields), which is what -c matches,
// case-insensitively; the table's header shows them upper-cased.
package output
