from ascend_setup.cli.main import main

raise SystemExit(main())
