from chain.paywall.app import main

raise SystemExit(main())
