"""What reaches the console: text from a graph escaped for the terminal
(`terminal`), native log lines silenced (`stderr`). Private to the package."""
