"""HTTP: the threaded server, its routes and the status page."""
