"""`python -m llmc_mcp` is the `llmc-mcp` command."""

from llmc_mcp.cli.main import main

raise SystemExit(main())
