from service.cli.app import main

main()
