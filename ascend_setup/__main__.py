from ascend_setup.cli import main

raise SystemExit(main())
