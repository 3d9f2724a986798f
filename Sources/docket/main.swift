import DocketCLI
import Foundation

exit(await DocketCommand.run(Array(CommandLine.arguments.dropFirst())))
