from dualpath.cli import main

main()
