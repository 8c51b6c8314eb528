from agent.cli.app import entry

entry()
