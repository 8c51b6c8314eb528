"""One module per command group of ``nib``; ``agent.cli.app`` assembles them."""
