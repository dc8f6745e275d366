"""GT's runtime: protocol, client connection, dispatcher, workers and local launch."""
